//! `Flex` kernels. Each runs one pass over contiguous `f32` storage (in place when the buffer is
//! uniquely owned) and falls back to composing Flex's own ops for other dtypes, broadcasting or
//! strided layouts.

use burn_backend::backend::ops::{FloatTensorOps, IntTensorOps};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    DType, IntDType, Shape, TensorData, TensorMetadata, get_or_init_device_settings,
};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::{FlexDevice, FlexTensor};

use super::composed;
use crate::ops::{RoutedOps, RoutedOpsFlex};

/// `f32` elements of a contiguous tensor, or `None` (other dtype, strided or offset view).
fn f32_slice(tensor: &FlexTensor) -> Option<&[f32]> {
    tensor.as_slice::<f32>()
}

/// Runs `f` over the `f32` elements of `x` and returns the result: in place when `x` is
/// contiguous and uniquely owned, on a copy when it is contiguous but shared. Gives `x` back when
/// it is not contiguous `f32` (the caller composes Flex's ops instead).
fn update_f32(mut x: FlexTensor, f: impl FnOnce(&mut [f32])) -> Result<FlexTensor, FlexTensor> {
    if x.dtype() != DType::F32 || !x.is_contiguous() || x.layout().start_offset() != 0 {
        return Err(x);
    }
    if x.is_unique()
        && x.layout().is_dense_unique_storage()
        && let Some(values) = x.try_storage_mut::<f32>()
    {
        f(values);
        return Ok(x);
    }
    let shape = x.shape();
    match f32_slice(&x) {
        Some(values) => {
            let mut out = values.to_vec();
            f(&mut out);
            Ok(FlexTensor::from_data(TensorData::new(out, shape)))
        }
        None => Err(x),
    }
}

/// Applies `f` to every element (see [`update_f32`]).
fn map_f32(x: FlexTensor, f: impl Fn(f32) -> f32) -> Result<FlexTensor, FlexTensor> {
    update_f32(x, |values| values.iter_mut().for_each(|v| *v = f(*v)))
}

/// The size of the last dimension (0 for a scalar).
fn width(x: &FlexTensor) -> usize {
    let shape = x.shape();
    shape
        .num_dims()
        .checked_sub(1)
        .map_or(0, |last| shape[last])
}

/// A per-feature parameter (`[features]`) of a row-wise op on `x`, when it is contiguous `f32`
/// and matches `x`'s last dimension.
fn row_param<'a>(x: &FlexTensor, param: &'a FlexTensor) -> Option<&'a [f32]> {
    let w = width(x);
    f32_slice(param).filter(|p| w > 0 && p.len() == w)
}

/// An int tensor of `shape` with `values`, in the device's default int dtype (as Burn's own index
/// ops return).
fn index_tensor(values: Vec<i64>, shape: Shape, device: &FlexDevice) -> FlexTensor {
    let int_dtype = get_or_init_device_settings::<Flex>(device).int_dtype;
    let data = match int_dtype {
        IntDType::I32 => TensorData::new(
            values
                .into_iter()
                .map(|i| i32::try_from(i).expect("index fits in i32"))
                .collect(),
            shape,
        ),
        _ => TensorData::new(values, shape),
    };
    let out = FlexTensor::from_data(data);
    if out.dtype() == DType::from(int_dtype) {
        out
    } else {
        Flex::int_cast(out, int_dtype)
    }
}

/// `erf` for the GELU kernels: Abramowitz and Stegun 7.1.26, absolute error below 1.5e-7.
///
/// GELU only ever uses `1 + erf(z)`, so an absolute error under the `f32` spacing near 1
/// (1.2e-7) is as good as a correctly rounded `erf` there, at a fraction of libm's cost (one
/// `exp` and a division): the fused `bias_gelu` is otherwise bound by `erff`.
pub(crate) fn gelu_erf(x: f32) -> f32 {
    const P: f32 = 0.327_591_1;
    const A: [f32; 5] = [
        0.254_829_6,
        -0.284_496_74,
        1.421_413_7,
        -1.453_152_1,
        1.061_405_4,
    ];
    let a = x.abs();
    let t = 1.0 / (1.0 + P * a);
    let poly = t * (A[0] + t * (A[1] + t * (A[2] + t * (A[3] + t * A[4]))));
    let y = 1.0 - poly * (-a * a).exp();
    y.copysign(x)
}

/// Exact (erf) GELU.
fn gelu(z: f32) -> f32 {
    0.5 * z * (1.0 + gelu_erf(z * std::f32::consts::FRAC_1_SQRT_2))
}

fn sigmoid(z: f32) -> f32 {
    1.0 / (1.0 + (-z).exp())
}

impl RoutedOps for Flex {
    fn add_relu(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        if lhs.shape() == rhs.shape()
            && let (Some(a), Some(b)) = (f32_slice(&lhs), f32_slice(&rhs))
        {
            let out: Vec<f32> = a.iter().zip(b).map(|(a, b)| (a + b).max(0.0)).collect();
            return FlexTensor::from_data(TensorData::new(out, lhs.shape()));
        }
        // Broadcasting, strided views or another float dtype: Flex's own ops.
        composed::add_relu::<Self>(lhs, rhs)
    }

    fn scale(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self> {
        map_f32(x, |v| v * alpha).unwrap_or_else(|x| composed::scale::<Self>(x, alpha))
    }

    fn argmax_last(x: &FloatTensor<Self>) -> IntTensor<Self> {
        let shape = x.shape();
        let last = shape.num_dims() - 1;
        let width = shape[last];
        // Indices come out in the device's default int dtype, as Burn's own argmax does.
        let int_dtype = get_or_init_device_settings::<Self>(&x.device()).int_dtype;
        if let Some(values) = f32_slice(x).filter(|_| width > 0) {
            let best = values.chunks_exact(width).map(|row| {
                // Start from the first number (index 0 when the row is all NaN): `>` is false
                // against NaN, so a NaN is never the maximum, and it keeps the first of equal
                // maxima.
                let mut best = row.iter().position(|v| !v.is_nan()).unwrap_or(0);
                let mut best_value = row[best];
                for (i, &v) in row.iter().enumerate().skip(best + 1) {
                    if v > best_value {
                        best = i;
                        best_value = v;
                    }
                }
                best
            });
            let mut out_shape = shape.clone();
            out_shape[last] = 1;
            let best = best
                .map(|i| i64::try_from(i).expect("index fits in i64"))
                .collect();
            return index_tensor(best, out_shape, &x.device());
        }
        Flex::float_argmax(x.clone(), last, int_dtype)
    }

    fn axpby(
        x: FloatTensor<Self>,
        y: Option<FloatTensor<Self>>,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self> {
        match y {
            None => Self::scale(x, alpha),
            Some(y) => {
                if x.shape() == y.shape()
                    && let (Some(a), Some(b)) = (f32_slice(&x), f32_slice(&y))
                {
                    let out: Vec<f32> =
                        a.iter().zip(b).map(|(a, b)| alpha * a + beta * b).collect();
                    return FlexTensor::from_data(TensorData::new(out, x.shape()));
                }
                composed::axpby::<Self>(x, Some(y), alpha, beta)
            }
        }
    }

    fn masked_fill_count(
        x: FloatTensor<Self>,
        mask: &BoolTensor<Self>,
        value: f32,
    ) -> (FloatTensor<Self>, IntTensor<Self>) {
        composed::masked_fill_count::<Self>(x, mask, value)
    }

    fn nan_to_num(
        x: FloatTensor<Self>,
        value: f32,
        with_mask: bool,
    ) -> (FloatTensor<Self>, Option<BoolTensor<Self>>) {
        if !with_mask {
            // One pass, in place when the buffer is ours.
            return match map_f32(x, |v| if v.is_nan() { value } else { v }) {
                Ok(out) => (out, None),
                Err(x) => composed::nan_to_num::<Self>(x, value, false),
            };
        }
        composed::nan_to_num::<Self>(x, value, true)
    }

    fn dequantize_relu(x: QuantizedTensor<Self>) -> FloatTensor<Self> {
        composed::dequantize_relu::<Self>(x)
    }

    fn round_half_even(x: FloatTensor<Self>) -> FloatTensor<Self> {
        // Burn's `float_round` also rounds half to even; it is the fallback for other dtypes.
        map_f32(x, f32::round_ties_even).unwrap_or_else(Flex::float_round)
    }

    fn bias_gelu(x: FloatTensor<Self>, bias: FloatTensor<Self>) -> FloatTensor<Self> {
        if let Some(b) = row_param(&x, &bias) {
            let w = b.len();
            let fused = update_f32(x, |values| {
                for row in values.chunks_exact_mut(w) {
                    for (v, b) in row.iter_mut().zip(b) {
                        *v = gelu(*v + b);
                    }
                }
            });
            return fused.unwrap_or_else(|x| composed::bias_gelu::<Self>(x, bias));
        }
        composed::bias_gelu::<Self>(x, bias)
    }

    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        if gate.shape() == up.shape()
            && let Some(u) = f32_slice(&up)
        {
            let fused = update_f32(gate, |g| {
                for (g, u) in g.iter_mut().zip(u) {
                    *g = *g * sigmoid(*g) * u;
                }
            });
            return fused.unwrap_or_else(|gate| composed::swiglu::<Self>(gate, up));
        }
        composed::swiglu::<Self>(gate, up)
    }

    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        if let Some(wt) = row_param(&x, &weight) {
            let w = wt.len();
            let fused = update_f32(x, |values| {
                for row in values.chunks_exact_mut(w) {
                    let mean_square = row.iter().map(|v| v * v).sum::<f32>() / w as f32;
                    let inverse = 1.0 / (mean_square + eps).sqrt();
                    for (v, g) in row.iter_mut().zip(wt) {
                        *v *= inverse * g;
                    }
                }
            });
            return fused.unwrap_or_else(|x| composed::rms_norm::<Self>(x, weight, eps));
        }
        composed::rms_norm::<Self>(x, weight, eps)
    }

    fn layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        if let (Some(g), Some(b)) = (row_param(&x, &gamma), row_param(&x, &beta)) {
            let w = g.len();
            let fused = update_f32(x, |values| {
                for row in values.chunks_exact_mut(w) {
                    let mean = row.iter().sum::<f32>() / w as f32;
                    let var = row.iter().map(|v| (v - mean) * (v - mean)).sum::<f32>() / w as f32;
                    let inverse = 1.0 / (var + eps).sqrt();
                    for ((v, g), b) in row.iter_mut().zip(g).zip(b) {
                        *v = (*v - mean) * inverse * g + b;
                    }
                }
            });
            return fused.unwrap_or_else(|x| composed::layer_norm::<Self>(x, gamma, beta, eps));
        }
        composed::layer_norm::<Self>(x, gamma, beta, eps)
    }

    fn softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let w = width(&x);
        if w == 0 {
            return composed::softmax_last::<Self>(x);
        }
        update_f32(x, |values| {
            for row in values.chunks_exact_mut(w) {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let mut sum = 0.0;
                for v in row.iter_mut() {
                    *v = (*v - max).exp();
                    sum += *v;
                }
                let inverse = 1.0 / sum;
                row.iter_mut().for_each(|v| *v *= inverse);
            }
        })
        .unwrap_or_else(composed::softmax_last::<Self>)
    }

    fn cross_entropy_logits(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let shape = logits.shape();
        let (batch, classes) = (shape[0], shape[1]);
        if let Some(x) = f32_slice(&logits)
            && batch > 0
            && classes > 0
        {
            // Any layout and int dtype; panics on a target outside `0..classes`.
            let class_of_row = composed::target_classes::<Self>(&targets, batch, classes);
            let mut total = 0.0_f64;
            for (row, &class) in x.chunks_exact(classes).zip(&class_of_row) {
                let max = row.iter().copied().fold(f32::NEG_INFINITY, f32::max);
                let sum: f32 = row.iter().map(|v| (v - max).exp()).sum();
                total += f64::from(max + sum.ln() - row[class]);
            }
            #[allow(clippy::cast_possible_truncation)] // The mean of f32 losses fits an f32.
            let mean = (total / batch as f64) as f32;
            return FlexTensor::from_data(TensorData::new(vec![mean], [1]));
        }
        composed::cross_entropy_logits::<Self>(logits, targets)
    }

    fn dropout(x: FloatTensor<Self>, p: f32, seed: u64) -> (FloatTensor<Self>, BoolTensor<Self>) {
        let scale = composed::dropout_scale(p);
        let shape = x.shape();
        let device = x.device();
        let keep = composed::dropout_keep(shape.num_elements(), p, seed);
        let fused = update_f32(x, |values| {
            for (v, keep) in values.iter_mut().zip(&keep) {
                *v = if *keep { *v * scale } else { 0.0 };
            }
        });
        match fused {
            Ok(out) => (out, composed::bool_tensor::<Self>(keep, shape, &device)),
            Err(x) => composed::dropout::<Self>(x, p, seed),
        }
    }

    fn clamp_ste(x: FloatTensor<Self>, lo: f32, hi: f32) -> FloatTensor<Self> {
        composed::check_clamp_bounds(lo, hi);
        // NaN stays NaN, as Burn's clamp leaves it.
        map_f32(x, |v| {
            if v < lo {
                lo
            } else if v > hi {
                hi
            } else {
                v
            }
        })
        .unwrap_or_else(|x| composed::clamp_ste::<Self>(x, lo, hi))
    }

    fn topk_last(x: &FloatTensor<Self>, k: usize) -> (FloatTensor<Self>, IntTensor<Self>) {
        let w = width(x);
        composed::check_k(k, w);
        let Some(values) = f32_slice(x).filter(|_| w > 0) else {
            return composed::topk_last::<Self>(x, k);
        };
        // Larger first, NaN after every number, ties by lower index.
        let order = |a: &(usize, f32), b: &(usize, f32)| {
            b.1.partial_cmp(&a.1)
                .unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan()))
                .then(a.0.cmp(&b.0))
        };
        let rows = values.len() / w;
        let mut top_values = Vec::with_capacity(rows * k);
        let mut top_indices = Vec::with_capacity(rows * k);
        let mut scratch: Vec<(usize, f32)> = Vec::with_capacity(w);
        for row in values.chunks_exact(w) {
            scratch.clear();
            scratch.extend(row.iter().copied().enumerate());
            if k > 0 && k < w {
                scratch.select_nth_unstable_by(k - 1, order);
            }
            let top = &mut scratch[..k];
            top.sort_unstable_by(order);
            top_values.extend(top.iter().map(|(_, v)| *v));
            top_indices.extend(
                top.iter()
                    .map(|(i, _)| i64::try_from(*i).expect("index fits in i64")),
            );
        }
        let mut out_shape = x.shape();
        let last = out_shape.num_dims() - 1;
        out_shape[last] = k;
        (
            FlexTensor::from_data(TensorData::new(top_values, out_shape.clone())),
            index_tensor(top_indices, out_shape, &x.device()),
        )
    }
}

impl RoutedOpsFlex for Flex {
    fn iota(len: usize, device: &FlexDevice) -> IntTensor<Self> {
        let int_dtype = get_or_init_device_settings::<Self>(device).int_dtype;
        let end = i64::try_from(len).expect("iota length fits in i64");
        Flex::int_arange(0..end, device, int_dtype)
    }
}

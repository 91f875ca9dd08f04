//! `Flex` kernels. Each runs one pass over `f32` rows of any row stride, in place when the
//! buffer is uniquely owned and on every core when Flex runs on rayon (see [`crate::flex`]),
//! and falls back to composing Flex's own ops for `f64`, broadcasting, or a last dimension
//! that is not contiguous. Inputs that are all `f16` or all `bf16` run the same `f32` kernel
//! (`in_f32`): widened to `f32` first, the output rounded once back to their dtype.

use burn_backend::backend::ops::{FloatTensorOps, IntTensorOps};
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    DType, FloatDType, IntDType, Shape, TensorData, TensorMetadata, get_or_init_device_settings,
};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::{FlexDevice, FlexTensor};

use super::arith::{self, bias_gelu_row, layer_norm_row, rms_norm_row, softmax_row};
use super::half::{half_dtype, in_f32, narrow, widen};
use super::{composed, fused_linear, fused_mlp};
use crate::flex::{
    Rows, Work, fill_pieces, is_writable, map_pieces, simd_fn, tensor, update_rows, zip_fresh,
};
use crate::ops::{RoutedOps, RoutedOpsFlex};

/// Applies `f` to every element: in place when `x`'s buffer is ours, any row stride (see
/// [`update_rows`]). Gives `x` back when it is not `f32` with a contiguous last dimension
/// (the caller composes Flex's ops instead). On AVX2 (`update_rows`), not in `simd_fn!`: its
/// ops are a few operations per element, bound by memory, where AVX-512 measured no faster.
fn map_f32(x: FlexTensor, f: impl Fn(f32) -> f32 + Sync) -> Result<FlexTensor, FlexTensor> {
    update_rows(x, Work::Light, |_, values| {
        values.iter_mut().for_each(|v| *v = f(*v));
    })
}

simd_fn! {
    /// `f(a, b)` element-wise over `a` and `b` of the same shape (any row strides), written over
    /// whichever buffer is ours (`a`'s first), else into a fresh one. Gives both back for other
    /// shapes (broadcasting), dtypes or layouts (boxed: only the fallback pays for it).
    fn zip_f32(
        a: FlexTensor,
        b: FlexTensor,
        work: Work,
        f: impl Fn(f32, f32) -> f32 + Sync,
    ) -> Result<FlexTensor, Box<(FlexTensor, FlexTensor)>> {
        let same_shape = a.layout().shape() == b.layout().shape();
        if !same_shape || Rows::of(&a).is_none() || Rows::of(&b).is_none() {
            return Err(Box::new((a, b)));
        }
        if !is_writable(&a) && !is_writable(&b) {
            // Both shared (slices of one projection, say): written once into a fresh buffer.
            let (a_rows, b_rows) = (
                Rows::of(&a).expect("checked"),
                Rows::of(&b).expect("checked"),
            );
            return Ok(tensor(zip_fresh(&a_rows, &b_rows, work, f), a.shape()));
        }
        let zipped = if !is_writable(&a) && is_writable(&b) {
            let a_rows = Rows::of(&a).expect("checked above");
            update_rows(b, work, |first, dst| {
                a_rows.zip(first, dst, |d, s| {
                    d.iter_mut().zip(s).for_each(|(d, s)| *d = f(*s, *d));
                });
            })
        } else {
            let b_rows = Rows::of(&b).expect("checked above");
            update_rows(a, work, |first, dst| {
                b_rows.zip(first, dst, |d, s| {
                    d.iter_mut().zip(s).for_each(|(d, s)| *d = f(*d, *s));
                });
            })
        };
        Ok(zipped.unwrap_or_else(|_| unreachable!("both have rows")))
    }
}

simd_fn! {
    /// `gelu(x + b)` over each row of `x` (`b` one row), in place where `x`'s buffer is ours.
    fn bias_gelu_rows(x: FlexTensor, b: &[f32]) -> Result<FlexTensor, FlexTensor> {
        update_rows(x, Work::Heavy, |_, rows| {
            for row in rows.chunks_exact_mut(b.len()) {
                bias_gelu_row(row, b);
            }
        })
    }
}

simd_fn! {
    /// The softmax of each row of `x` (rows of `width`).
    fn softmax_rows(x: FlexTensor, width: usize) -> Result<FlexTensor, FlexTensor> {
        update_rows(x, Work::Heavy, |_, rows| {
            for row in rows.chunks_exact_mut(width) {
                softmax_row(row);
            }
        })
    }
}

simd_fn! {
    /// The sum of the cross-entropies of `rows` (logits) against their classes, one per piece of
    /// rows (see [`map_pieces`]), in row order.
    fn cross_entropy_pieces(rows: &Rows<'_>, class_of_row: &[usize]) -> Vec<f64> {
        map_pieces(rows.count(), rows.width(), Work::Heavy, |first, count| {
            (first..first + count)
                .map(|r| arith::cross_entropy_row(rows.row(r), class_of_row[r]))
                .sum::<f64>()
        })
    }
}

/// The size of the last dimension (0 for a scalar).
fn width(x: &FlexTensor) -> usize {
    let shape = x.shape();
    shape
        .num_dims()
        .checked_sub(1)
        .map_or(0, |last| shape[last])
}

/// A per-feature parameter (`[features]`) of a row-wise op on `x`: its values, when they are
/// `f32` in one contiguous row of `x`'s width.
fn row_param<'a>(x: &FlexTensor, param: &'a FlexTensor) -> Option<&'a [f32]> {
    let w = width(x);
    Rows::of(param)
        .filter(|p| w > 0 && p.count() == 1 && p.width() == w)
        .map(|p| p.row(0))
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

impl RoutedOps for Flex {
    fn add_relu(lhs: FloatTensor<Self>, rhs: FloatTensor<Self>) -> FloatTensor<Self> {
        // In bf16, Flex's own add and relu (two light passes) beat widening, the kernel and
        // narrowing (0.7x at 1K and 1M, BENCHMARKS.md): only f16 is widened.
        if half_dtype(&[&lhs, &rhs]) == Some(FloatDType::F16) {
            return narrow(Self::add_relu(widen(lhs), widen(rhs)), FloatDType::F16);
        }
        // Broadcasting, a strided last dimension or another float dtype: Flex's own ops.
        zip_f32(lhs, rhs, Work::Light, arith::add_relu)
            .unwrap_or_else(|inputs| composed::add_relu::<Self>(inputs.0, inputs.1))
    }

    fn scale(x: FloatTensor<Self>, alpha: f32) -> FloatTensor<Self> {
        // A single Burn primitive (in place on a unique buffer, like a fused loop): no fusion
        // beats it, and the fused machinery's checks cost more than it does on small tensors
        // (BENCHMARKS.md).
        composed::scale::<Self>(x, alpha)
    }

    fn argmax_last(x: &FloatTensor<Self>) -> IntTensor<Self> {
        // A single Burn primitive, which no fusion beats (measured equal, BENCHMARKS.md).
        composed::argmax_last::<Self>(x)
    }

    fn axpby(
        x: FloatTensor<Self>,
        y: Option<FloatTensor<Self>>,
        alpha: f32,
        beta: f32,
    ) -> FloatTensor<Self> {
        match y {
            None => Self::scale(x, alpha),
            Some(y) => in_f32([x, y], |[x, y]| Self::axpby(x, Some(y), alpha, beta))
                .or_else(|[x, y]| {
                    zip_f32(x, y, Work::Light, |a, b| arith::axpby(a, b, alpha, beta))
                })
                .unwrap_or_else(|inputs| {
                    composed::axpby::<Self>(inputs.0, Some(inputs.1), alpha, beta)
                }),
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
        let [x, bias] = match in_f32([x, bias], |[x, b]| Self::bias_gelu(x, b)) {
            Ok(out) => return out,
            Err(inputs) => inputs,
        };
        let Some(b) = row_param(&x, &bias) else {
            return composed::bias_gelu::<Self>(x, bias);
        };
        bias_gelu_rows(x, b).unwrap_or_else(|x| composed::bias_gelu::<Self>(x, bias.clone()))
    }

    fn swiglu(gate: FloatTensor<Self>, up: FloatTensor<Self>) -> FloatTensor<Self> {
        in_f32([gate, up], |[g, u]| Self::swiglu(g, u))
            .or_else(|[gate, up]| zip_f32(gate, up, Work::Heavy, arith::swiglu))
            .unwrap_or_else(|inputs| composed::swiglu::<Self>(inputs.0, inputs.1))
    }

    fn rms_norm(x: FloatTensor<Self>, weight: FloatTensor<Self>, eps: f32) -> FloatTensor<Self> {
        let [x, weight] = match in_f32([x, weight], |[x, w]| Self::rms_norm(x, w, eps)) {
            Ok(out) => return out,
            Err(inputs) => inputs,
        };
        let Some(wt) = row_param(&x, &weight) else {
            return composed::rms_norm::<Self>(x, weight, eps);
        };
        // (On AVX2 through `update_rows`, not in `simd_fn!`: the norms' AVX-512 builds measured no
        // faster, the layer norm's 10 % slower; a square root per row, a few operations per
        // element.)
        update_rows(x, Work::Moderate, |_, rows| {
            for row in rows.chunks_exact_mut(wt.len()) {
                rms_norm_row(row, wt, eps);
            }
        })
        .unwrap_or_else(|x| composed::rms_norm::<Self>(x, weight.clone(), eps))
    }

    fn layer_norm(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let [x, gamma, beta] =
            match in_f32([x, gamma, beta], |[x, g, b]| Self::layer_norm(x, g, b, eps)) {
                Ok(out) => return out,
                Err(inputs) => inputs,
            };
        let (Some(g), Some(b)) = (row_param(&x, &gamma), row_param(&x, &beta)) else {
            return composed::layer_norm::<Self>(x, gamma, beta, eps);
        };
        // (On AVX2, as `rms_norm`.)
        update_rows(x, Work::Moderate, |_, rows| {
            for row in rows.chunks_exact_mut(g.len()) {
                layer_norm_row(row, g, b, eps);
            }
        })
        .unwrap_or_else(|x| composed::layer_norm::<Self>(x, gamma.clone(), beta.clone(), eps))
    }

    fn rms_norm_linear(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        eps: f32,
    ) -> FloatTensor<Self> {
        fused_linear::rms_norm_linear_on::<Self>(x, norm_weight, weight, bias, eps)
    }

    fn layer_norm_linear(
        x: FloatTensor<Self>,
        gamma: FloatTensor<Self>,
        beta: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        eps: f32,
    ) -> FloatTensor<Self> {
        fused_linear::layer_norm_linear_on::<Self>(x, gamma, beta, weight, bias, eps)
    }

    fn swiglu_linear(
        gate: FloatTensor<Self>,
        up: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
    ) -> FloatTensor<Self> {
        fused_linear::swiglu_linear_on::<Self>(gate, up, weight, bias)
    }

    fn rms_norm_swiglu_mlp(
        x: FloatTensor<Self>,
        norm_weight: FloatTensor<Self>,
        gate_weight: FloatTensor<Self>,
        up_weight: FloatTensor<Self>,
        down_weight: FloatTensor<Self>,
        eps: f32,
    ) -> FloatTensor<Self> {
        let weights = [gate_weight, up_weight, down_weight];
        fused_mlp::flex::on_flex(x, norm_weight, weights, eps, false).0
    }

    fn softmax_last(x: FloatTensor<Self>) -> FloatTensor<Self> {
        let [x] = match in_f32([x], |[x]| Self::softmax_last(x)) {
            Ok(out) => return out,
            Err(inputs) => inputs,
        };
        let w = width(&x);
        if w == 0 {
            return composed::softmax_last::<Self>(x);
        }
        softmax_rows(x, w).unwrap_or_else(composed::softmax_last::<Self>)
    }

    fn self_attention(
        x: FloatTensor<Self>,
        q_weight: FloatTensor<Self>,
        k_weight: FloatTensor<Self>,
        v_weight: FloatTensor<Self>,
        out_weight: FloatTensor<Self>,
        heads: usize,
        causal: bool,
    ) -> FloatTensor<Self> {
        // In chunks of sequences, with the fused softmax.
        let weights = [q_weight, k_weight, v_weight, out_weight];
        super::attention::self_attention_on::<Self>(x, weights, heads, causal)
    }

    fn linear_cross_entropy(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        targets: IntTensor<Self>,
        options: crate::CrossEntropyOptions,
    ) -> FloatTensor<Self> {
        super::linear_ce::flex_loss(x, weight, bias, targets, &options)
    }

    fn cross_entropy_logits(
        logits: FloatTensor<Self>,
        targets: IntTensor<Self>,
    ) -> FloatTensor<Self> {
        let [logits] = match in_f32([logits], |[l]| {
            Self::cross_entropy_logits(l, targets.clone())
        }) {
            Ok(out) => return out,
            Err(inputs) => inputs,
        };
        let shape = logits.shape();
        let (batch, classes) = (shape[0], shape[1]);
        let Some(rows) = Rows::of(&logits) else {
            return composed::cross_entropy_logits::<Self>(logits, targets);
        };
        // Any layout and int dtype; panics on a target outside `0..classes`.
        let class_of_row = composed::target_classes::<Self>(&targets, batch, classes);
        let partial = cross_entropy_pieces(&rows, &class_of_row);
        #[allow(clippy::cast_possible_truncation)] // The mean of f32 losses fits an f32.
        let mean = (partial.iter().sum::<f64>() / batch as f64) as f32;
        tensor(vec![mean], Shape::new([1]))
    }

    fn dropout(x: FloatTensor<Self>, p: f32, seed: u64) -> (FloatTensor<Self>, BoolTensor<Self>) {
        if let Some(dtype) = half_dtype(&[&x]) {
            let (out, keep) = Self::dropout(widen(x), p, seed);
            return (narrow(out, dtype), keep);
        }
        let scale = composed::dropout_scale(p);
        let shape = x.shape();
        let device = x.device();
        let w = width(&x).max(1);
        let n = shape.num_elements();
        // The keep mask first (one byte per element), then one pass over `x`.
        let mut keep = Vec::with_capacity(n);
        fill_pieces(
            &mut keep.spare_capacity_mut()[..n],
            w,
            Work::Moderate,
            |first, part| {
                composed::dropout_keep_into(part, first * w, p, seed);
            },
        );
        // SAFETY: `fill_pieces` hands every element of the first `n` to `dropout_keep_into`,
        // which writes each element it is given.
        unsafe { keep.set_len(n) };
        let fused = update_rows(x, Work::Light, |first, rows| {
            let (start, len) = (first * w, rows.len());
            arith::dropout_apply(rows, &keep[start..start + len], scale);
        });
        match fused {
            Ok(out) => (out, composed::bool_tensor::<Self>(keep, shape, &device)),
            Err(x) => composed::dropout::<Self>(x, p, seed),
        }
    }

    fn clamp_ste(x: FloatTensor<Self>, lo: f32, hi: f32) -> FloatTensor<Self> {
        composed::check_clamp_bounds(lo, hi);
        // `f32::clamp` keeps NaN, as Burn's clamp does, and has no branch to mispredict.
        map_f32(x, |v| v.clamp(lo, hi)).unwrap_or_else(|x| composed::clamp_ste::<Self>(x, lo, hi))
    }

    fn topk_last(x: &FloatTensor<Self>, k: usize) -> (FloatTensor<Self>, IntTensor<Self>) {
        let w = width(x);
        composed::check_k(k, w);
        let Some(rows) = Rows::of(x) else {
            return composed::topk_last::<Self>(x, k);
        };
        // Larger first, NaN after every number, ties by lower index.
        let order = |a: &(usize, f32), b: &(usize, f32)| {
            b.1.partial_cmp(&a.1)
                .unwrap_or_else(|| a.1.is_nan().cmp(&b.1.is_nan()))
                .then(a.0.cmp(&b.0))
        };
        let pieces = map_pieces(rows.count(), w, Work::Heavy, |first, count| {
            let mut values = Vec::with_capacity(count * k);
            let mut indices = Vec::with_capacity(count * k);
            let mut scratch: Vec<(usize, f32)> = Vec::with_capacity(w);
            for r in first..first + count {
                scratch.clear();
                scratch.extend(rows.row(r).iter().copied().enumerate());
                if k > 0 && k < w {
                    scratch.select_nth_unstable_by(k - 1, order);
                }
                let top = &mut scratch[..k];
                top.sort_unstable_by(order);
                values.extend(top.iter().map(|(_, v)| *v));
                indices.extend(
                    top.iter()
                        .map(|(i, _)| i64::try_from(*i).expect("index fits in i64")),
                );
            }
            (values, indices)
        });
        let (values, indices): (Vec<_>, Vec<_>) = pieces.into_iter().unzip();
        let mut out_shape = x.shape();
        let last = out_shape.num_dims() - 1;
        out_shape[last] = k;
        (
            tensor(values.concat(), out_shape.clone()),
            index_tensor(indices.concat(), out_shape, &x.device()),
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

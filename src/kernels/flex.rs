//! `Flex` kernels. Each runs one pass over contiguous `f32` storage (in place when the buffer is
//! uniquely owned) and falls back to composing Flex's own ops for other dtypes, broadcasting or
//! strided layouts.

use burn_backend::backend::ops::FloatTensorOps;
use burn_backend::backend::ops::IntTensorOps;
use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{DType, IntDType, TensorData, TensorMetadata, get_or_init_device_settings};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::{FlexDevice, FlexTensor};

use super::composed;
use crate::ops::{RoutedOps, RoutedOpsFlex};

/// `f32` elements of a contiguous tensor, or `None` (other dtype, strided or offset view).
fn f32_slice(tensor: &FlexTensor) -> Option<&[f32]> {
    tensor.as_slice::<f32>()
}

/// Applies `f` to every element: in place when `x` is contiguous `f32` and uniquely owned, else
/// into a new buffer. Gives `x` back when it is not contiguous `f32`.
fn map_f32(mut x: FlexTensor, f: impl Fn(f32) -> f32) -> Result<FlexTensor, FlexTensor> {
    if x.dtype() != DType::F32 || !x.is_contiguous() || x.layout().start_offset() != 0 {
        return Err(x);
    }
    if x.is_unique()
        && x.layout().is_dense_unique_storage()
        && let Some(values) = x.try_storage_mut::<f32>()
    {
        values.iter_mut().for_each(|v| *v = f(*v));
        return Ok(x);
    }
    let shape = x.shape();
    match f32_slice(&x) {
        Some(values) => {
            let out: Vec<f32> = values.iter().map(|v| f(*v)).collect();
            Ok(FlexTensor::from_data(TensorData::new(out, shape)))
        }
        None => Err(x),
    }
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
                let mut best = 0;
                for (i, v) in row.iter().enumerate() {
                    // `>` keeps the first of equal maxima; a NaN is never the maximum.
                    if *v > row[best] || row[best].is_nan() && !v.is_nan() {
                        best = i;
                    }
                }
                best
            });
            let mut out_shape = shape.clone();
            out_shape[last] = 1;
            let data = match int_dtype {
                IntDType::I32 => TensorData::new(
                    best.map(|i| i32::try_from(i).expect("index fits in i32"))
                        .collect(),
                    out_shape,
                ),
                _ => TensorData::new(
                    best.map(|i| i64::try_from(i).expect("index fits in i64"))
                        .collect(),
                    out_shape,
                ),
            };
            let out = FlexTensor::from_data(data);
            return if out.dtype() == DType::from(int_dtype) {
                out
            } else {
                Flex::int_cast(out, int_dtype)
            };
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
}

impl RoutedOpsFlex for Flex {
    fn iota(len: usize, device: &FlexDevice) -> IntTensor<Self> {
        let int_dtype = get_or_init_device_settings::<Self>(device).int_dtype;
        let end = i64::try_from(len).expect("iota length fits in i64");
        Flex::int_arange(0..end, device, int_dtype)
    }
}

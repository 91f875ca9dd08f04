//! Composite op bodies: each is generic over `B: Backend` and built from backend primitives, so
//! it runs on every backend, and on `Autodiff<B, C>` its gradient comes from the composition.
//! `ops.toml` names them with `composite = "crate::composite::..."`.

use burn_backend::slice::Slice;
use burn_backend::tensor::{Device, FloatTensor};
use burn_backend::{Backend, Scalar, TensorMetadata, get_or_init_device_settings};

/// Element-wise sum of the tensors in `xs`.
///
/// # Panics
///
/// When `xs` is empty (routing refuses an empty list before this runs) or the shapes differ and
/// do not broadcast.
pub fn sum_all<B: Backend>(xs: Vec<FloatTensor<B>>) -> FloatTensor<B> {
    xs.into_iter()
        .reduce(B::float_add)
        .expect("sum_all needs at least one tensor")
}

/// Consecutive pieces of `x` along its last dimension, of the given sizes.
///
/// # Panics
///
/// When the sizes do not add up to the last dimension.
pub fn split_last<B: Backend>(x: FloatTensor<B>, sizes: Vec<usize>) -> Vec<FloatTensor<B>> {
    let shape = x.shape();
    let last = shape.num_dims() - 1;
    let total: usize = sizes.iter().sum();
    assert!(
        total == shape[last],
        "split_last: sizes {sizes:?} add up to {total}, but the last dimension is {}",
        shape[last]
    );
    let mut start = 0;
    sizes
        .into_iter()
        .map(|size| {
            let mut slices: Vec<Slice> = (0..last).map(|_| Slice::from(..)).collect();
            let (from, to) = (start, start + size);
            slices.push(Slice::new(
                isize::try_from(from).expect("index fits in isize"),
                Some(isize::try_from(to).expect("index fits in isize")),
                1,
            ));
            start = to;
            B::float_slice(x.clone(), &slices)
        })
        .collect()
}

/// `ln(1 + exp(beta * x)) / beta`, as `(relu(z) + ln(1 + exp(-|z|))) / beta` with `z = beta * x`
/// so large `|z|` neither overflows nor loses precision.
pub fn softplus<B: Backend>(x: FloatTensor<B>, beta: f32) -> FloatTensor<B> {
    let z = B::float_mul_scalar(x, Scalar::from(beta));
    let tail = B::float_log1p(B::float_exp(B::float_neg(B::float_abs(z.clone()))));
    B::float_div_scalar(B::float_add(B::relu(z), tail), Scalar::from(beta))
}

/// `[0, 1, ..., len - 1]` as floats on `device`, in the device's default float dtype.
///
/// # Panics
///
/// When `len` does not fit in an `i64`.
pub fn ramp<B: Backend>(len: usize, device: &Device<B>) -> FloatTensor<B> {
    let settings = get_or_init_device_settings::<B>(device);
    let end = i64::try_from(len).expect("ramp length fits in i64");
    B::int_into_float(
        B::int_arange(0..end, device, settings.int_dtype),
        settings.float_dtype,
    )
}

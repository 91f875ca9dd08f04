//! Every op of `RoutedOps` written once with backend primitives, generic over `B: Backend`.
//!
//! `Cube` uses these as its kernels, and `Remote` for the ops without output metadata (each
//! primitive an operation on the server's backend); the Flex kernels fall back to them for dtypes, layouts or broadcasts their fused
//! loops do not cover.

use std::mem::MaybeUninit;

use burn_backend::tensor::{BoolTensor, FloatTensor, IntTensor, QuantizedTensor};
use burn_backend::{
    Backend, FloatDType, IntDType, Scalar, Shape, TensorMetadata, get_or_init_device_settings,
};

/// [`add_relu`](crate::tensor::add_relu) written with `B`'s primitives.
pub fn add_relu<B: Backend>(lhs: FloatTensor<B>, rhs: FloatTensor<B>) -> FloatTensor<B> {
    B::relu(B::float_add(lhs, rhs))
}

/// [`scale`](crate::tensor::scale) written with `B`'s primitives.
pub fn scale<B: Backend>(x: FloatTensor<B>, alpha: f32) -> FloatTensor<B> {
    B::float_mul_scalar(x, Scalar::from(alpha))
}

/// [`argmax_last`](crate::tensor::argmax_last) written with `B`'s primitives.
pub fn argmax_last<B: Backend>(x: &FloatTensor<B>) -> IntTensor<B> {
    let last = x.shape().num_dims() - 1;
    let int_dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    B::float_argmax(x.clone(), last, int_dtype)
}

/// Burn's `float_round` rounds half to even.
pub fn round_half_even<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    B::float_round(x)
}

/// [`axpby`](crate::tensor::axpby) written with `B`'s primitives.
pub fn axpby<B: Backend>(
    x: FloatTensor<B>,
    y: Option<FloatTensor<B>>,
    alpha: f32,
    beta: f32,
) -> FloatTensor<B> {
    let ax = B::float_mul_scalar(x, Scalar::from(alpha));
    match y {
        Some(y) => B::float_add(ax, B::float_mul_scalar(y, Scalar::from(beta))),
        None => ax,
    }
}

/// [`masked_fill_count`](crate::tensor::masked_fill_count) written with `B`'s primitives.
pub fn masked_fill_count<B: Backend>(
    x: FloatTensor<B>,
    mask: &BoolTensor<B>,
    value: f32,
) -> (FloatTensor<B>, IntTensor<B>) {
    let int_dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    let filled = B::float_mask_fill(x, mask.clone(), Scalar::from(value));
    let count = B::int_sum(B::bool_into_int(mask.clone(), int_dtype));
    (filled, B::int_reshape(count, Shape::new([1])))
}

/// [`nan_to_num`](crate::tensor::nan_to_num) written with `B`'s primitives.
pub fn nan_to_num<B: Backend>(
    x: FloatTensor<B>,
    value: f32,
    with_mask: bool,
) -> (FloatTensor<B>, Option<BoolTensor<B>>) {
    let bool_dtype = get_or_init_device_settings::<B>(&x.device()).bool_dtype;
    let mask = B::float_is_nan(x.clone(), bool_dtype);
    let filled = B::float_mask_fill(x, mask.clone(), Scalar::from(value));
    (filled, with_mask.then_some(mask))
}

/// [`dequantize_relu`](crate::tensor::dequantize_relu) written with `B`'s primitives.
pub fn dequantize_relu<B: Backend>(x: QuantizedTensor<B>) -> FloatTensor<B> {
    B::relu(B::dequantize(x, FloatDType::F32))
}

/// `bias` (shape `[features]`) viewed with `x`'s rank, ready to broadcast over its leading
/// dimensions.
pub(crate) fn broadcast_row<B: Backend>(row: FloatTensor<B>, rank: usize) -> FloatTensor<B> {
    let features = row.shape().num_elements();
    let mut dims = vec![1; rank];
    dims[rank - 1] = features;
    B::float_reshape(row, Shape::from(dims))
}

/// Sums `t` over every dimension but the last and returns it with shape `[features]`: the
/// gradient of a per-feature parameter.
pub(crate) fn sum_to_row<B: Backend>(t: FloatTensor<B>) -> FloatTensor<B> {
    let shape = t.shape();
    let rank = shape.num_dims();
    let features = shape[rank - 1];
    let leading: Vec<usize> = (0..rank - 1).collect();
    B::float_reshape(B::float_sum_dims(t, &leading), Shape::new([features]))
}

fn last_dim<B: Backend>(x: &FloatTensor<B>) -> usize {
    x.shape().num_dims() - 1
}

/// [`bias_gelu`](crate::tensor::bias_gelu) written with `B`'s primitives.
pub fn bias_gelu<B: Backend>(x: FloatTensor<B>, bias: FloatTensor<B>) -> FloatTensor<B> {
    let rank = x.shape().num_dims();
    B::gelu(B::float_add(x, broadcast_row::<B>(bias, rank)))
}

/// [`swiglu`](crate::tensor::swiglu) written with `B`'s primitives.
pub fn swiglu<B: Backend>(gate: FloatTensor<B>, up: FloatTensor<B>) -> FloatTensor<B> {
    let silu = B::float_mul(gate.clone(), B::sigmoid(gate));
    B::float_mul(silu, up)
}

/// `1 / sqrt(mean(x^2) + eps)` over the last dimension, kept with size 1.
pub(crate) fn rms_inverse<B: Backend>(x: FloatTensor<B>, eps: f32) -> FloatTensor<B> {
    let last = last_dim::<B>(&x);
    let mean_square = B::float_mean_dim(B::float_mul(x.clone(), x), last);
    B::float_recip(B::float_sqrt(B::float_add_scalar(
        mean_square,
        Scalar::from(eps),
    )))
}

/// [`rms_norm`](crate::tensor::rms_norm) written with `B`'s primitives.
pub fn rms_norm<B: Backend>(x: FloatTensor<B>, weight: FloatTensor<B>, eps: f32) -> FloatTensor<B> {
    let rank = x.shape().num_dims();
    let inverse = rms_inverse::<B>(x.clone(), eps);
    B::float_mul(B::float_mul(x, inverse), broadcast_row::<B>(weight, rank))
}

/// `(x - mean) / sqrt(var + eps)` over the last dimension, and the `1 / sqrt(var + eps)` factor.
pub(crate) fn standardize<B: Backend>(
    x: FloatTensor<B>,
    eps: f32,
) -> (FloatTensor<B>, FloatTensor<B>) {
    let last = last_dim::<B>(&x);
    let mean = B::float_mean_dim(x.clone(), last);
    let centered = B::float_sub(x, mean);
    let var = B::float_mean_dim(B::float_mul(centered.clone(), centered.clone()), last);
    let inverse = B::float_recip(B::float_sqrt(B::float_add_scalar(var, Scalar::from(eps))));
    (B::float_mul(centered, inverse.clone()), inverse)
}

/// [`layer_norm`](crate::tensor::layer_norm) written with `B`'s primitives.
pub fn layer_norm<B: Backend>(
    x: FloatTensor<B>,
    gamma: FloatTensor<B>,
    beta: FloatTensor<B>,
    eps: f32,
) -> FloatTensor<B> {
    let rank = x.shape().num_dims();
    let (normalized, _) = standardize::<B>(x, eps);
    B::float_add(
        B::float_mul(normalized, broadcast_row::<B>(gamma, rank)),
        broadcast_row::<B>(beta, rank),
    )
}

/// [`softmax_last`](crate::tensor::softmax_last) written with `B`'s primitives.
pub fn softmax_last<B: Backend>(x: FloatTensor<B>) -> FloatTensor<B> {
    let last = last_dim::<B>(&x);
    B::softmax(x, last)
}

/// `targets` (`[batch]`, any int dtype) as a `[batch, classes]` one-hot matrix in `like`'s float
/// dtype.
pub(crate) fn one_hot<B: Backend>(
    targets: IntTensor<B>,
    classes: usize,
    like: &FloatTensor<B>,
) -> FloatTensor<B> {
    let device = like.device();
    let settings = get_or_init_device_settings::<B>(&device);
    let batch = targets.shape().num_elements();
    let end = i64::try_from(classes).expect("class count fits in i64");
    let classes_row = B::int_reshape(
        B::int_arange(0..end, &device, settings.int_dtype),
        Shape::new([1, classes]),
    );
    // Compare in the dtype `arange` uses.
    let targets = if IntDType::from(targets.dtype()) == settings.int_dtype {
        targets
    } else {
        B::int_cast(targets, settings.int_dtype)
    };
    let column = B::int_reshape(targets, Shape::new([batch, 1]));
    let rows = B::int_expand(column, Shape::new([batch, classes]));
    let hits = B::int_equal(
        B::int_expand(classes_row, Shape::new([batch, classes])),
        rows,
        settings.bool_dtype,
    );
    B::bool_into_float(hits, FloatDType::from(like.dtype()))
}

/// The class of every row, read back to the host and checked against `0..classes`: an
/// out-of-range target would otherwise select nothing and silently lower the loss.
///
/// # Panics
///
/// With the row and the value of the first target outside `0..classes`, or when the targets do
/// not have one entry per row.
pub(crate) fn target_classes<B: Backend>(
    targets: &IntTensor<B>,
    batch: usize,
    classes: usize,
) -> Vec<usize> {
    let rows = Targets {
        op: "cross_entropy_logits",
        rows_of: "logits",
        ignore_index: None,
    };
    rows.classes::<B>(targets, batch, classes)
}

/// How a loss reads its class targets on the host (one read-back): the op and the input whose
/// rows they label, for the panics, and the op's `ignore_index` when it has the option.
pub(crate) struct Targets<'a> {
    pub op: &'a str,
    pub rows_of: &'a str,
    /// `Some(ignored)` for an op with an `ignore_index` option (`Some(None)`: none this call).
    pub ignore_index: Option<Option<i64>>,
}

impl Targets<'_> {
    /// The targets read back to the host as `i64`, one per row.
    ///
    /// # Panics
    ///
    /// When the read fails, or there is not one target per row.
    fn values<B: Backend>(&self, targets: &IntTensor<B>, rows: usize) -> Vec<i64> {
        let op = self.op;
        let data = burn_tensor::read_sync(B::int_into_data(targets.clone()))
            .unwrap_or_else(|e| panic!("{op}: reading the targets failed: {e:?}"));
        let values = data
            .convert::<i64>()
            .try_into_vec::<i64>()
            .expect("int targets convert to i64");
        assert_eq!(
            values.len(),
            rows,
            "{op}: {} targets for {rows} rows of {}",
            values.len(),
            self.rows_of
        );
        values
    }

    /// Row `row`'s `target` as a class of `0..classes`.
    ///
    /// # Panics
    ///
    /// With the row and the value when it is not one.
    fn class(&self, row: usize, target: i64, classes: usize) -> usize {
        let note = if self.ignore_index.is_some() {
            " (and is not `ignore_index`)"
        } else {
            ""
        };
        usize::try_from(target)
            .ok()
            .filter(|&c| c < classes)
            .unwrap_or_else(|| {
                panic!(
                    "{}: target {target} of row {row} is outside 0..{classes}{note}",
                    self.op
                )
            })
    }

    /// `Some(class)` per row, or `None` for an ignored one.
    ///
    /// # Panics
    ///
    /// With the row and the value of the first target that is neither a class nor ignored, or
    /// when there is not one target per row.
    pub(crate) fn read<B: Backend>(
        &self,
        targets: &IntTensor<B>,
        rows: usize,
        classes: usize,
    ) -> Vec<Option<usize>> {
        let ignored = self.ignore_index.flatten();
        self.values::<B>(targets, rows)
            .iter()
            .enumerate()
            .map(|(i, &target)| (Some(target) != ignored).then(|| self.class(i, target, classes)))
            .collect()
    }

    /// The class of every row, for an op that ignores none: converted in the buffer the targets
    /// were read into (an `i64` and a `usize` take the same room), so the read-back is the only
    /// host buffer.
    ///
    /// # Panics
    ///
    /// As [`Targets::read`].
    pub(crate) fn classes<B: Backend>(
        &self,
        targets: &IntTensor<B>,
        rows: usize,
        classes: usize,
    ) -> Vec<usize> {
        debug_assert!(
            self.ignore_index.is_none(),
            "{}: an op with ignore_index",
            self.op
        );
        self.values::<B>(targets, rows)
            .into_iter()
            .enumerate()
            .map(|(i, target)| self.class(i, target, classes))
            .collect()
    }
}

/// Checks the targets on the host first (see `target_classes`): one read-back per call.
pub fn cross_entropy_logits<B: Backend>(
    logits: FloatTensor<B>,
    targets: IntTensor<B>,
) -> FloatTensor<B> {
    let shape = logits.shape();
    target_classes::<B>(&targets, shape[0], shape[1]);
    let (batch, classes) = (shape[0], shape[1]);
    let log_probs = B::log_softmax(logits.clone(), 1);
    let picked = B::float_sum_dim(
        B::float_mul(log_probs, one_hot::<B>(targets, classes, &logits)),
        1,
    );
    let mean = B::float_mean_dim(B::float_reshape(picked, Shape::new([batch])), 0);
    B::float_neg(B::float_reshape(mean, Shape::new([1])))
}

/// The keep mask of `dropout`: see [`dropout_keep_into`]. The same on every backend.
pub(crate) fn dropout_keep(numel: usize, p: f32, seed: u64) -> Vec<bool> {
    let mut keep = Vec::with_capacity(numel);
    dropout_keep_into(&mut keep.spare_capacity_mut()[..numel], 0, p, seed);
    // SAFETY: `dropout_keep_into` writes every element of the slice it is given.
    unsafe { keep.set_len(numel) };
    keep
}

/// Writes the keep decision of every element `start..start + keep.len()` into `keep`. Each
/// element gets a 16-bit draw, a quarter of a 64-bit hash (the splitmix64 finaliser) of `seed`
/// and its index / 4, and is kept when the draw, as a fraction of 2^16, is at least `p` (so `p`
/// counts in steps of 2^-16). One hash per four elements is what lets the fused kernel keep up.
/// (Public for the roofline of `benches/ops.rs`, whose dropout compute floor is this hash.)
pub fn dropout_keep_into(keep: &mut [MaybeUninit<bool>], start: usize, p: f32, seed: u64) {
    // Keep when draw >= threshold: p = 0 keeps everything, p = 1 nothing.
    #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
    let threshold = (f64::from(p) * 65536.0).ceil() as u64;
    let draws = |word: usize| {
        let bits = dropout_hash(seed, word as u64);
        [0, 16, 32, 48].map(|shift| (bits >> shift) & 0xFFFF >= threshold)
    };
    let write = |dst: &mut [MaybeUninit<bool>], src: &[bool]| {
        dst.iter_mut().zip(src).for_each(|(d, s)| {
            d.write(*s);
        });
    };
    // A partial word first, then whole words, then a partial word.
    let head = ((4 - start % 4) % 4).min(keep.len());
    let (first, rest) = keep.split_at_mut(head);
    write(first, &draws(start / 4)[start % 4..start % 4 + head]);
    let mut word = (start + head) / 4;
    let mut chunks = rest.chunks_exact_mut(4);
    for chunk in &mut chunks {
        write(chunk, &draws(word));
        word += 1;
    }
    let tail = chunks.into_remainder();
    write(tail, &draws(word));
}

/// The splitmix64 finaliser of `seed` and a word index.
fn dropout_hash(seed: u64, word: u64) -> u64 {
    let mut z = seed ^ word.wrapping_mul(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// `1 / (1 - p)`, after checking `p`.
pub(crate) fn dropout_scale(p: f32) -> f32 {
    assert!(
        (0.0..=1.0).contains(&p),
        "dropout: `p` must be a probability in [0, 1], got {p}"
    );
    if p >= 1.0 { 0.0 } else { 1.0 / (1.0 - p) }
}

/// A bool tensor of `values` on `device`, stored in the device's bool dtype (Cube, for one, takes
/// only `u8`/`u32` bool data, not native `bool`).
pub(crate) fn bool_tensor<B: Backend>(
    values: Vec<bool>,
    shape: Shape,
    device: &burn_backend::tensor::Device<B>,
) -> BoolTensor<B> {
    let dtype = get_or_init_device_settings::<B>(device).bool_dtype;
    B::bool_from_data(
        burn_backend::TensorData::new(values, shape).convert_dtype(dtype.into()),
        device,
    )
}

/// [`dropout`](crate::tensor::dropout) written with `B`'s primitives.
pub fn dropout<B: Backend>(
    x: FloatTensor<B>,
    p: f32,
    seed: u64,
) -> (FloatTensor<B>, BoolTensor<B>) {
    let scale = dropout_scale(p);
    let shape = x.shape();
    let device = x.device();
    let keep = dropout_keep(shape.num_elements(), p, seed);
    let mask = bool_tensor::<B>(keep, shape, &device);
    let float_dtype = FloatDType::from(x.dtype());
    let kept = B::float_mul(x, B::bool_into_float(mask.clone(), float_dtype));
    (B::float_mul_scalar(kept, Scalar::from(scale)), mask)
}

pub(crate) fn check_clamp_bounds(lo: f32, hi: f32) {
    assert!(
        lo <= hi,
        "clamp_ste: `lo` ({lo}) must not exceed `hi` ({hi})"
    );
}

/// [`clamp_ste`](crate::tensor::clamp_ste) written with `B`'s primitives.
pub fn clamp_ste<B: Backend>(x: FloatTensor<B>, lo: f32, hi: f32) -> FloatTensor<B> {
    check_clamp_bounds(lo, hi);
    B::float_clamp(x, Scalar::from(lo), Scalar::from(hi))
}

pub(crate) fn check_k(k: usize, width: usize) {
    assert!(
        k <= width,
        "topk_last: `k` ({k}) exceeds the size of the last dimension ({width})"
    );
}

/// [`topk_last`](crate::tensor::topk_last) written with `B`'s primitives.
pub fn topk_last<B: Backend>(x: &FloatTensor<B>, k: usize) -> (FloatTensor<B>, IntTensor<B>) {
    let last = last_dim::<B>(x);
    check_k(k, x.shape()[last]);
    let int_dtype = get_or_init_device_settings::<B>(&x.device()).int_dtype;
    B::float_topk_with_indices(x.clone(), last, k, int_dtype)
}

/// `x * p.scale + p.shift`, broadcasting as Burn's `float_mul` and `float_add` do.
pub fn affine<B: Backend>(x: FloatTensor<B>, p: crate::ops::AffinePrimitive<B>) -> FloatTensor<B> {
    let scaled = B::float_mul(x, p.scale);
    match p.shift {
        Some(shift) => B::float_add(scaled, shift),
        None => scaled,
    }
}

/// The mean and the biased variance along the last dimension, kept with size 1.
pub fn moments<B: Backend>(x: FloatTensor<B>) -> crate::ops::MomentsPrimitive<B> {
    let last = x.shape().num_dims() - 1;
    let mean = B::float_mean_dim(x.clone(), last);
    let centred = B::float_sub(x, mean.clone());
    let variance = B::float_mean_dim(B::float_mul(centred.clone(), centred), last);
    crate::ops::MomentsPrimitive { mean, variance }
}

/// `x` with `fill` where `mask` is set. A `Fill::From` tensor is expanded to `x`'s shape first,
/// so that its gradient is summed back to its own.
pub fn fill_where<B: Backend>(
    x: FloatTensor<B>,
    mask: &BoolTensor<B>,
    fill: crate::ops::FillPrimitive<B>,
) -> FloatTensor<B> {
    use crate::ops::FillPrimitive;
    match fill {
        FillPrimitive::Zero => B::float_mask_fill(x, mask.clone(), Scalar::from(0.0f32)),
        FillPrimitive::Value(value) => B::float_mask_fill(x, mask.clone(), Scalar::from(value)),
        FillPrimitive::From(source) => {
            let source = B::float_expand(source, x.shape());
            B::float_mask_where(x, mask.clone(), source)
        }
    }
}

/// Counts the NaN and ±inf elements of `x` on its device, then reads the one-element count back
/// (Burn's `int_into_data` is async: on a GPU the readback waits for the queue).
pub async fn count_nonfinite<B: Backend>(x: &FloatTensor<B>) -> usize {
    let settings = get_or_init_device_settings::<B>(&x.device());
    let nan = B::float_is_nan(x.clone(), settings.bool_dtype);
    let inf = B::float_is_inf(x.clone(), settings.bool_dtype);
    let count = B::int_sum(B::bool_into_int(B::bool_or(nan, inf), settings.int_dtype));
    let data = B::int_into_data(count)
        .await
        .expect("count_nonfinite: reading the count back failed");
    let count = data.iter::<i64>().next().unwrap_or(0);
    usize::try_from(count).expect("count_nonfinite: a count is never negative")
}

//! `linear_cross_entropy`: the loss of a linear layer's logits, `x @ weight^T (+ bias)`, against
//! class targets, without the logits ever existing whole.
//!
//! The rows of `x` go in chunks. Each chunk's logits (`[rows, classes]`) are computed, turned
//! into its losses and, when gradients are wanted, overwritten with the logits' gradient, which
//! is at once multiplied into the gradients of `x` (that chunk's rows), `weight` and `bias`
//! (summed over the chunks). Only one chunk of logits is alive at a time, so the memory of the
//! whole pass is the inputs' gradients plus one chunk, against the `[rows, classes]` logits,
//! their softmax and their gradient of the unfused `linear` + cross-entropy. On Flex, the
//! gradient of an `x` the call owns (one made by an op and moved in, which nothing else holds)
//! is formed in `x`'s own buffer, each chunk's rows once they have been read for the last time,
//! so a tracked pass allocates no `[rows, features]` buffer beside `x`.
//!
//! - [`CrossEntropyOptions`]: the reduction, an ignored target, label smoothing, z-loss.
//! - [`composed`]: the pass written with backend primitives (`Cube`, `Remote`, `f64`), and
//!   [`Flex`]'s kernel on `f32` rows with `gemm` (`f16` and `bf16` widened to `f32`).
//! - The `Autodiff<B, C>` kernel (hand-written; `RoutedOpsAutodiff` calls it): a tracked call
//!   runs the pass with gradients and keeps them; its backward pass only scales them by the
//!   incoming gradient.

use burn_backend::tensor::{FloatTensor, IntTensor};
use burn_backend::{Backend, FloatDType, Scalar, Shape, TensorMetadata};
use burn_dispatch::backends::Flex;
use burn_dispatch::backends::flex::FlexTensor;

use super::composed::Targets;
use super::gemm::{Operand, Out, dense, matmul, operand, product};
use super::half::{half_dtype, narrow, widen};
use crate::flex::math::{exp, ln};
use crate::flex::{Work, max_of, simd_fn, split, sum_by, tensor};

/// How `linear_cross_entropy` reduces the rows' losses, and what it adds to them.
///
/// The defaults give PyTorch's `cross_entropy(x @ weight.T + bias, targets)`. Fields by name:
/// `CrossEntropyOptions { label_smoothing: 0.1, ..Default::default() }`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CrossEntropyOptions {
    /// How the rows' losses become one number. Default [`Reduction::Mean`].
    pub reduction: Reduction,
    /// A row whose target is this value has no loss and no gradient, and a mean leaves it out
    /// of its count (PyTorch's `ignore_index`, often `-100`). Default `None`: every target must
    /// be a class.
    pub ignore_index: Option<i64>,
    /// `ε` in `[0, 1]`: the target distribution puts `1 - ε` on the target class and spreads `ε`
    /// evenly over every class, so a row's loss is `(1 - ε) (lse - z[t]) + ε (lse - mean(z))`,
    /// with `lse` the log-sum-exp of its logits `z`. Default `0`.
    pub label_smoothing: f32,
    /// `λ ≥ 0`: adds `λ lse²` to each row's loss, which keeps the log-sum-exp near 0 (the
    /// z-loss of PaLM). Default `0`.
    pub z_loss: f32,
}

impl Default for CrossEntropyOptions {
    fn default() -> Self {
        Self {
            reduction: Reduction::Mean,
            ignore_index: None,
            label_smoothing: 0.0,
            z_loss: 0.0,
        }
    }
}

/// How [`CrossEntropyOptions`] reduces the rows' losses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Reduction {
    /// The mean over the rows whose target is not ignored (`0` when every row is).
    #[default]
    Mean,
    /// The sum over the rows.
    Sum,
}

/// Logit rows per chunk: about as many logits as `x` has elements (a chunk costs the memory of
/// `x`), but at least 64 rows, so that each chunk's matrix products stay efficient, and at most
/// every row.
pub fn chunk_rows(rows: usize, features: usize, classes: usize) -> usize {
    (rows * features / classes.max(1)).max(64).min(rows.max(1))
}

/// What one pass computes: the loss, and the gradients that were asked for.
pub struct Pass<T> {
    /// The reduced loss, one element.
    pub loss: T,
    /// The gradients of `x`, `weight` and `bias`, where wanted.
    pub grads: [Option<T>; 3],
}

/// The targets checked on the host, one read-back: `Some(class)`, or `None` for an ignored row
/// (see [`Targets::read`]).
fn classes_of<B: Backend>(
    targets: &IntTensor<B>,
    rows: usize,
    classes: usize,
    ignore: Option<i64>,
) -> Vec<Option<usize>> {
    let reading = Targets {
        op: "linear_cross_entropy",
        rows_of: "x",
        ignore_index: Some(ignore),
    };
    reading.read::<B>(targets, rows, classes)
}

/// Checks the shapes and the options; returns `(rows, features, classes)`.
///
/// # Panics
///
/// When `weight` is not `[classes, features]` for `x`'s `[rows, features]`, or an option is out
/// of its range.
fn dims(x: &Shape, weight: &Shape, options: &CrossEntropyOptions) -> (usize, usize, usize) {
    let (rows, features) = (x[0], x[1]);
    assert!(
        weight.num_dims() == 2 && weight[1] == features,
        "linear_cross_entropy: weight has shape {:?}, but x is {:?}: weight must be \
         [classes, {features}], one row of x's width per class",
        weight.as_slice(),
        x.as_slice()
    );
    let smoothing = options.label_smoothing;
    assert!(
        (0.0..=1.0).contains(&smoothing),
        "linear_cross_entropy: label_smoothing {smoothing} is outside [0, 1]"
    );
    assert!(
        options.z_loss >= 0.0 && options.z_loss.is_finite(),
        "linear_cross_entropy: z_loss {} must be finite and at least 0",
        options.z_loss
    );
    (rows, features, weight[0])
}

/// The factor of every row's loss and gradient: `1 / counted rows` for a mean, else 1.
fn scale(options: &CrossEntropyOptions, targets: &[Option<usize>]) -> f64 {
    match options.reduction {
        Reduction::Sum => 1.0,
        Reduction::Mean => {
            let counted = targets.iter().flatten().count();
            #[allow(clippy::cast_precision_loss)] // A row count is far below 2^52.
            if counted == 0 {
                0.0
            } else {
                1.0 / counted as f64
            }
        }
    }
}

// --- Flex: f32 rows and gemm. ---

/// One row of logits `z` (bias already added): its loss, unscaled, and when `grad` is set, `z`
/// overwritten with its gradient times `scale`.
#[inline(always)] // Into `rows_loss`, compiled once per instruction set.
fn row(z: &mut [f32], target: usize, options: &CrossEntropyOptions, scale: f32, grad: bool) -> f64 {
    let classes = z.len();
    let max = max_of(z);
    let eps = options.label_smoothing;
    #[allow(clippy::cast_precision_loss)] // A class count is far below 2^24.
    let inv_classes = 1.0 / classes as f32;
    let mean = if eps > 0.0 {
        f64::from(sum_by(z, |v| v)) / classes as f64
    } else {
        0.0
    };
    let picked = f64::from(z[target]);
    // With the gradient, `z` keeps `exp(z - max)`, so each element takes one `exp`.
    let sum = if grad {
        for v in z.iter_mut() {
            *v = exp(*v - max);
        }
        sum_by(z, |e| e)
    } else {
        sum_by(z, |v| exp(v - max))
    };
    let lse = max + ln(sum);
    let lse64 = f64::from(lse);
    let loss = (1.0 - f64::from(eps)) * (lse64 - picked)
        + f64::from(eps) * (lse64 - mean)
        + f64::from(options.z_loss) * lse64 * lse64;
    if grad {
        // d/dz_j = (1 + 2 λ lse) p_j - ε / classes - (1 - ε) [j = target], p_j = e_j / sum.
        let gain = scale * (1.0 + 2.0 * options.z_loss * lse) / sum;
        let floor = scale * eps * inv_classes;
        for e in z.iter_mut() {
            *e = gain * *e - floor;
        }
        z[target] -= scale * (1.0 - eps);
    }
    loss
}

simd_fn! {
    /// [`row`] over each row of `logits` (their bias added first), a row of a missing target
    /// zeroed: the sum of the rows' losses. Compiled for AVX-512 and AVX2 where the CPU has them
    /// (the lane reductions give the same bits on each).
    fn rows_loss(
        logits: &mut [f32],
        classes: usize,
        bias: Option<&[f32]>,
        targets: &[Option<usize>],
        options: &CrossEntropyOptions,
        scale: f32,
        grad: bool,
    ) -> f64 {
        let mut sum = 0.0;
        for (z, target) in logits.chunks_exact_mut(classes).zip(targets) {
            if let Some(bias) = bias {
                z.iter_mut().zip(bias).for_each(|(v, b)| *v += b);
            }
            match target {
                Some(t) => sum += row(z, *t, options, scale, grad),
                None => z.fill(0.0),
            }
        }
        sum
    }
}

/// The chunked pass on `f32` operands: `x` `[rows, features]`, `weight` `[classes, features]`,
/// `bias` `[classes]`. Each product is split by blocks of its output across rayon's threads
/// when Flex runs on rayon ([`split`]), so the pass uses the cores Burn's matmul would.
///
/// With `dx_over_x`, `x` is a row-major buffer the pass may overwrite, and the gradient of `x`
/// is written over it, chunk by chunk once the chunk's rows have been read for the last time
/// (the weight's gradient is formed first), so the pass allocates no `[rows, features]` buffer
/// of its own; it returns no `dx` then. The values are the same either way.
#[allow(clippy::too_many_lines)]
fn flex_pass(
    (x, weight, bias): (Operand, Operand, Option<&[f32]>),
    (rows, features, classes): (usize, usize, usize),
    targets: &[Option<usize>],
    options: &CrossEntropyOptions,
    (wanted, dx_over_x): ([bool; 3], bool),
) -> (f64, [Option<Vec<f32>>; 3]) {
    let scale = scale(options, targets);
    #[allow(clippy::cast_possible_truncation)] // A reciprocal of a row count, or 1.
    let scale32 = scale as f32;
    let any = wanted.iter().any(|w| *w);
    let chunk = chunk_rows(rows, features, classes);
    let wide = |n: usize| isize::try_from(n).expect("fits");
    let mut logits = vec![0.0_f32; chunk * classes];
    let mut dx = (wanted[0] && !dx_over_x).then(|| vec![0.0_f32; rows * features]);
    // Where the gradient of `x` goes: its own buffer, or over `x` (whose pointer came from a
    // writable buffer, see `flex`).
    let dx_out = match dx.as_mut() {
        Some(dx) => Some(Out {
            at: dx.as_mut_ptr(),
            row: wide(features),
        }),
        None if wanted[0] => Some(Out {
            at: x.at.cast_mut(),
            row: wide(features),
        }),
        None => None,
    };
    let mut dw = wanted[1].then(|| vec![0.0_f32; classes * features]);
    let mut db = wanted[2].then(|| vec![0.0_f32; classes]);
    let mut total = 0.0_f64;
    for first in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - first);
        let xs = x.at(first, 0);
        let z = Out {
            at: logits.as_mut_ptr(),
            row: wide(classes),
        };
        // z = x_chunk @ weight^T, by blocks of classes (columns of z).
        // SAFETY: z holds n × classes values; x's rows `first..first + n` and the weight are
        // inside their storage.
        unsafe { product((n, classes, features), z, false, xs, weight.t()) };
        // The rows' losses and, when wanted, their gradients over the logits, by rows.
        total += split(n, classes, Work::Moderate, |r| {
            // SAFETY: rows `r` of z are this block's alone.
            let part =
                unsafe { std::slice::from_raw_parts_mut(z.at(r.start, 0).at, r.len() * classes) };
            let targets = &targets[first + r.start..first + r.end];
            rows_loss(part, classes, bias, targets, options, scale32, any)
        })
        .iter()
        .sum::<f64>();
        if !any {
            continue;
        }
        let dz = Operand {
            at: logits.as_ptr(),
            row: wide(classes),
            col: 1,
        };
        if let Some(dw) = dw.as_mut() {
            // dweight += dz^T @ x_chunk, by blocks of classes (rows of dweight).
            let out = Out {
                at: dw.as_mut_ptr(),
                row: wide(features),
            };
            split(classes, n * features, Work::Heavy, |r| {
                // SAFETY: dweight's rows `r` are this block's alone.
                unsafe {
                    matmul(
                        (r.len(), features, n),
                        out.at(r.start, 0),
                        first > 0,
                        dz.t().at(r.start, 0),
                        xs,
                    )
                };
            });
        }
        if let Some(out) = dx_out {
            // dx_chunk = dz @ weight, by blocks of features (columns of dx); after dweight,
            // which reads the chunk's rows of x that dx may overwrite.
            // SAFETY: dx's rows `first..first + n` are written by this product alone (by
            // blocks of columns), and no later product reads x's rows `first..first + n`.
            unsafe { product((n, features, classes), out.at(first, 0), false, dz, weight) };
        }
        if let Some(db) = db.as_mut() {
            for z in logits[..n * classes].chunks_exact(classes) {
                db.iter_mut().zip(z).for_each(|(d, g)| *d += g);
            }
        }
    }
    (total * scale, [dx, dw, db])
}

/// [`flex_pass`] on Flex tensors: contiguous `f32` ones; `f16` and `bf16` widened first, the
/// results rounded back once. `x` back for other dtypes or layouts (the caller composes). The
/// gradient of a uniquely owned `x` (an `f32` one, or the widened copy of a half one) is formed
/// in its buffer.
fn flex(
    mut x: FlexTensor,
    weight: &FlexTensor,
    bias: Option<&FlexTensor>,
    targets: &IntTensor<Flex>,
    options: &CrossEntropyOptions,
    wanted: [bool; 3],
) -> Result<Pass<FlexTensor>, FlexTensor> {
    let mut all = vec![&x, weight];
    all.extend(bias);
    if let Some(dtype) = half_dtype(&all) {
        let Ok(pass) = flex(
            widen(x.clone()),
            &widen(weight.clone()),
            bias.map(|b| widen(b.clone())).as_ref(),
            targets,
            options,
            wanted,
        ) else {
            return Err(x);
        };
        return Ok(Pass {
            loss: narrow(pass.loss, dtype),
            grads: pass.grads.map(|g| g.map(|g| narrow(g, dtype))),
        });
    }
    let (Some(ws), Some(_)) = (operand(weight), operand(&x)) else {
        return Err(x);
    };
    let bs = match bias {
        Some(b) => match dense(b) {
            Some(b) => Some(b),
            None => return Err(x),
        },
        None => None,
    };
    let dims = dims(&x.shape(), &weight.shape(), options);
    let targets = classes_of::<Flex>(targets, dims.0, dims.2, options.ignore_index);
    let [x_shape, weight_shape, bias_shape] = [
        x.shape(),
        weight.shape(),
        bias.map_or_else(|| Shape::new([0]), TensorMetadata::shape),
    ];
    // The operand of `x`: its writable buffer when its gradient is wanted and it is ours (the
    // pass then writes that gradient over it), else read in place.
    let over_x = wanted[0].then(|| crate::flex::writable(&mut x)).flatten();
    let (xs, dx_over_x) = match over_x {
        Some(buffer) => (
            Operand {
                at: buffer.as_mut_ptr().cast_const(),
                row: isize::try_from(dims.1).expect("fits"),
                col: 1,
            },
            true,
        ),
        None => (operand(&x).expect("checked above"), false),
    };
    let (loss, [dx, dw, db]) =
        flex_pass((xs, ws, bs), dims, &targets, options, (wanted, dx_over_x));
    #[allow(clippy::cast_possible_truncation)] // The loss is an f32 value summed in f64.
    let loss = tensor(vec![loss as f32], Shape::new([1]));
    let dx = if dx_over_x {
        Some(x)
    } else {
        dx.map(|g| tensor(g, x_shape))
    };
    Ok(Pass {
        loss,
        grads: [
            dx,
            dw.map(|g| tensor(g, weight_shape)),
            db.map(|g| tensor(g, bias_shape)),
        ],
    })
}

// --- Every backend: the same pass with its primitives. ---

/// The pass with backend primitives, chunk by chunk like the Flex kernel: the kernel of `Cube`
/// and `Remote`, and of dtypes Flex's kernel does not take.
pub fn composed_pass<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    targets: &IntTensor<B>,
    options: &CrossEntropyOptions,
    wanted: [bool; 3],
) -> Pass<FloatTensor<B>> {
    let (rows, features, classes) = dims(&x.shape(), &weight.shape(), options);
    let host = classes_of::<B>(targets, rows, classes, options.ignore_index);
    let scale = scale(options, &host);
    let device = x.device();
    let dtype = FloatDType::from(x.dtype());
    let any = wanted.iter().any(|w| *w);
    let chunk = chunk_rows(rows, features, classes);
    let weight_t = B::float_transpose(weight.clone());
    let eps = f64::from(options.label_smoothing);
    let lambda = f64::from(options.z_loss);
    #[allow(clippy::cast_precision_loss)] // A class count is far below 2^52.
    let classes_f = classes as f64;
    let mut loss: Option<FloatTensor<B>> = None;
    let mut dxs = Vec::new();
    let mut dw: Option<FloatTensor<B>> = None;
    let mut db: Option<FloatTensor<B>> = None;
    let add = |acc: Option<FloatTensor<B>>, t: FloatTensor<B>| match acc {
        Some(acc) => B::float_add(acc, t),
        None => t,
    };
    for first in (0..rows).step_by(chunk) {
        let n = chunk.min(rows - first);
        let xs = B::float_slice(x.clone(), &[(first..first + n).into()]);
        let mut z = B::float_matmul(xs.clone(), weight_t.clone());
        if let Some(b) = &bias {
            z = B::float_add(z, B::float_reshape(b.clone(), Shape::new([1, classes])));
        }
        // Per row: its target's one-hot (zero for an ignored row) and whether it counts.
        let mut one_hot = vec![0.0_f32; n * classes];
        let mut counts = vec![0.0_f32; n];
        for (r, target) in host[first..first + n].iter().enumerate() {
            if let Some(t) = target {
                one_hot[r * classes + t] = 1.0;
                counts[r] = 1.0;
            }
        }
        let float = |values: Vec<f32>, shape: [usize; 2]| {
            B::float_cast(
                B::float_from_data(burn_backend::TensorData::new(values, shape), &device),
                dtype,
            )
        };
        let one_hot = float(one_hot, [n, classes]);
        let counts = float(counts, [n, 1]);
        let max = B::float_max_dim(z.clone(), 1);
        let shifted = B::float_sub(z.clone(), max.clone());
        let sum = B::float_sum_dim(B::float_exp(shifted), 1);
        let lse = B::float_add(B::float_log(sum), max);
        // (1 - ε)(lse - z[t]) + ε (lse - mean z) + λ lse², per row, times whether it counts.
        let picked = B::float_sum_dim(B::float_mul(z.clone(), one_hot.clone()), 1);
        let mean = B::float_mean_dim(z.clone(), 1);
        let rows_loss = B::float_add(
            B::float_add(
                B::float_mul_scalar(B::float_sub(lse.clone(), picked), Scalar::from(1.0 - eps)),
                B::float_mul_scalar(B::float_sub(lse.clone(), mean), Scalar::from(eps)),
            ),
            B::float_mul_scalar(B::float_mul(lse.clone(), lse.clone()), Scalar::from(lambda)),
        );
        let rows_loss = B::float_mul(rows_loss, counts.clone());
        loss = Some(add(loss, B::float_sum(rows_loss)));
        if !any {
            continue;
        }
        // dz = scale (((1 + 2 λ lse) p - ε / classes - (1 - ε) one_hot) × counts).
        let p = B::float_exp(B::float_sub(z, lse.clone()));
        let gain = B::float_add_scalar(
            B::float_mul_scalar(lse, Scalar::from(2.0 * lambda)),
            Scalar::from(1.0),
        );
        let dz = B::float_sub(
            B::float_sub_scalar(B::float_mul(p, gain), Scalar::from(eps / classes_f)),
            B::float_mul_scalar(one_hot, Scalar::from(1.0 - eps)),
        );
        let dz = B::float_mul_scalar(B::float_mul(dz, counts), Scalar::from(scale));
        if wanted[0] {
            dxs.push(B::float_matmul(dz.clone(), weight.clone()));
        }
        if wanted[1] {
            dw = Some(add(dw, B::float_matmul(B::float_transpose(dz.clone()), xs)));
        }
        if wanted[2] {
            let col = B::float_reshape(B::float_sum_dim(dz, 0), Shape::new([classes]));
            db = Some(add(db, col));
        }
    }
    let loss = match loss {
        Some(sum) => {
            B::float_mul_scalar(B::float_reshape(sum, Shape::new([1])), Scalar::from(scale))
        }
        None => B::float_zeros(Shape::new([1]), &device, dtype),
    };
    // (No rows: no chunk, and the gradients are zeros of their shapes.)
    let zeros = |shape: Shape| B::float_zeros(shape, &device, dtype);
    let dx = wanted[0].then(|| {
        if dxs.is_empty() {
            zeros(Shape::new([0, features]))
        } else {
            B::float_cat(dxs, 0)
        }
    });
    let dw = dw.or_else(|| wanted[1].then(|| zeros(Shape::new([classes, features]))));
    let db = db.or_else(|| wanted[2].then(|| zeros(Shape::new([classes]))));
    Pass {
        loss,
        grads: [dx, dw, db],
    }
}

/// The loss alone, with backend primitives: `linear_cross_entropy`'s composition (the trait
/// method's default body, so `Cube` and `Remote` run it).
pub fn composed<B: Backend>(
    x: FloatTensor<B>,
    weight: FloatTensor<B>,
    bias: Option<FloatTensor<B>>,
    targets: IntTensor<B>,
    options: crate::CrossEntropyOptions,
) -> FloatTensor<B> {
    composed_pass::<B>(x, weight, bias, &targets, &options, [false; 3]).loss
}

/// The pass a backend runs: fused on Flex, composed elsewhere.
pub trait LinearCrossEntropyPass: Backend {
    /// The loss and the wanted gradients of `x`, `weight`, `bias`.
    fn linear_cross_entropy_pass(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        targets: &IntTensor<Self>,
        options: &CrossEntropyOptions,
        wanted: [bool; 3],
    ) -> Pass<FloatTensor<Self>> {
        composed_pass::<Self>(x, weight, bias, targets, options, wanted)
    }
}

impl LinearCrossEntropyPass for Flex {
    fn linear_cross_entropy_pass(
        x: FloatTensor<Self>,
        weight: FloatTensor<Self>,
        bias: Option<FloatTensor<Self>>,
        targets: &IntTensor<Self>,
        options: &CrossEntropyOptions,
        wanted: [bool; 3],
    ) -> Pass<FloatTensor<Self>> {
        flex(x, &weight, bias.as_ref(), targets, options, wanted)
            .unwrap_or_else(|x| composed_pass::<Self>(x, weight, bias, targets, options, wanted))
    }
}

#[cfg(feature = "cube")]
impl LinearCrossEntropyPass for crate::rt::Cube {}

#[cfg(feature = "remote")]
impl LinearCrossEntropyPass for crate::rt::Remote {}

/// `Flex`'s kernel of `linear_cross_entropy` (the loss alone): the fused pass, else the
/// composition.
pub(crate) fn flex_loss(
    x: FlexTensor,
    weight: FlexTensor,
    bias: Option<FlexTensor>,
    targets: IntTensor<Flex>,
    options: &CrossEntropyOptions,
) -> FlexTensor {
    Flex::linear_cross_entropy_pass(x, weight, bias, &targets, options, [false; 3]).loss
}

#[cfg(feature = "autodiff")]
pub(crate) mod autodiff {
    use burn_backend::tensor::{FloatTensor, IntTensor};
    use burn_backend::{FloatDType, Shape, TensorMetadata};

    use super::{CrossEntropyOptions, LinearCrossEntropyPass};
    use crate::ops::RoutedOps;
    use crate::rt::autodiff::Autodiff;
    use crate::rt::autodiff::checkpoint::base::Checkpointer;
    use crate::rt::autodiff::grads::Gradients;
    use crate::rt::autodiff::ops::{Backward, Ops, OpsKind};
    use crate::rt::{Backend, CheckpointStrategy};

    /// The backward pass: the gradients of `x`, `weight` and `bias` the forward pass formed,
    /// scaled by the loss's incoming gradient (one element).
    #[derive(Debug)]
    struct LinearCrossEntropyBackward;

    impl<B: Backend> Backward<B, 3> for LinearCrossEntropyBackward {
        type State = [Option<FloatTensor<B>>; 3];

        fn backward(self, ops: Ops<Self::State, 3>, grads: &mut Gradients, _: &mut Checkpointer) {
            let grad = grads.consume::<B>(&ops.node);
            for (parent, formed) in ops.parents.into_iter().zip(ops.state) {
                if let (Some(parent), Some(formed)) = (parent, formed) {
                    let ones = vec![1; formed.shape().num_dims()];
                    let factor = B::float_reshape(grad.clone(), Shape::from(ones));
                    grads.register::<B>(parent.id, B::float_mul(formed, factor));
                }
            }
        }
    }

    /// The kernel: see the module.
    pub(crate) fn linear_cross_entropy<B, C>(
        x: FloatTensor<Autodiff<B, C>>,
        weight: FloatTensor<Autodiff<B, C>>,
        bias: Option<FloatTensor<Autodiff<B, C>>>,
        targets: IntTensor<Autodiff<B, C>>,
        options: CrossEntropyOptions,
    ) -> FloatTensor<Autodiff<B, C>>
    where
        B: RoutedOps + LinearCrossEntropyPass,
        C: CheckpointStrategy,
    {
        let wanted = [
            x.is_tracked(),
            weight.is_tracked(),
            bias.as_ref().is_some_and(|b| b.is_tracked()),
        ];
        let dtype = FloatDType::from(x.primitive().dtype());
        let device = x.primitive().device();
        let (x, x_node) = x.into_parts();
        let (weight, weight_node) = weight.into_parts();
        // Without a bias, a fresh untracked leaf stands in its place among the parents.
        let (bias, bias_node) = match bias {
            Some(b) => {
                let (b, node) = b.into_parts();
                (Some(b), node)
            }
            None => {
                let empty = B::float_empty(Shape::new([0]), &device, dtype);
                (None, FloatTensor::<Autodiff<B>>::new(empty).node())
            }
        };
        let parents = [x_node, weight_node, bias_node];
        match LinearCrossEntropyBackward
            .prepare::<C>(parents)
            .compute_bound()
            .stateful()
        {
            OpsKind::Tracked(prep) => {
                let pass =
                    B::linear_cross_entropy_pass(x, weight, bias, &targets, &options, wanted);
                prep.finish(pass.grads, pass.loss)
            }
            OpsKind::UnTracked(prep) => prep.finish(<B as RoutedOps>::linear_cross_entropy(
                x, weight, bias, targets, options,
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use burn_backend::TensorData;
    use burn_backend::ops::IntTensorOps;

    use super::*;

    fn pass(x: FlexTensor, wanted: [bool; 3]) -> Pass<FlexTensor> {
        let (rows, features, classes) = (70, 3, 5);
        let values = |n: usize, k: f32| (0..n).map(|i| (i as f32 * k).sin()).collect::<Vec<_>>();
        let weight = tensor(
            values(classes * features, 0.7),
            Shape::new([classes, features]),
        );
        let targets: Vec<i64> = (0..rows as i64).map(|r| r % classes as i64).collect();
        let targets = Flex::int_from_data(TensorData::new(targets, [rows]), &Default::default());
        assert_eq!(x.shape(), Shape::new([rows, features]));
        Flex::linear_cross_entropy_pass(
            x,
            weight,
            None,
            &targets,
            &CrossEntropyOptions::default(),
            wanted,
        )
    }

    fn x() -> FlexTensor {
        tensor(
            (0..210).map(|i| (i as f32 * 0.3).cos()).collect(),
            Shape::new([70, 3]),
        )
    }

    #[test]
    fn the_gradient_of_an_owned_x_is_formed_in_its_buffer_with_the_same_values() {
        let owned = x();
        let buffer = owned.storage::<f32>().as_ptr();
        let over = pass(owned, [true, true, false]);
        let dx = over.grads[0].as_ref().expect("dx");
        assert_eq!(dx.storage::<f32>().as_ptr(), buffer, "dx is formed over x");
        // A shared `x` (the caller keeps a handle) is read, not written: a buffer of its own.
        let shared = x();
        let kept = shared.clone();
        let fresh = pass(shared, [true, true, false]);
        let fresh_dx = fresh.grads[0].as_ref().expect("dx");
        assert_ne!(
            fresh_dx.storage::<f32>().as_ptr(),
            kept.storage::<f32>().as_ptr()
        );
        assert_eq!(
            kept.storage::<f32>(),
            x().storage::<f32>(),
            "x is unchanged"
        );
        assert_eq!(dx.storage::<f32>(), fresh_dx.storage::<f32>());
        let (a, b) = (over.grads[1].as_ref(), fresh.grads[1].as_ref());
        assert_eq!(
            a.expect("dweight").storage::<f32>(),
            b.expect("dweight").storage::<f32>()
        );
        assert_eq!(over.loss.storage::<f32>(), fresh.loss.storage::<f32>());
    }

    #[test]
    fn an_owned_x_whose_gradient_is_not_wanted_is_left_alone() {
        let pass = pass(x(), [false, true, false]);
        assert!(pass.grads[0].is_none());
        assert!(pass.grads[1].is_some());
    }
}
